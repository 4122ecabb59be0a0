//! The f64 reference (oracle) of every operator: naive loops that are obviously right.
