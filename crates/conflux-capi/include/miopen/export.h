/*
 * conflux: export.h — symbol visibility for the miopen.h API.
 *
 * libMIOpen is built by Rust, which exports every API symbol itself; this macro only marks
 * the declarations (and gives them default visibility when a client compiles with
 * -fvisibility=hidden and includes the header from a shared object of its own).
 */
#ifndef MIOPEN_EXPORT_H_
#define MIOPEN_EXPORT_H_

#if defined(_WIN32)
#define MIOPEN_EXPORT __declspec(dllimport)
#elif defined(__GNUC__) || defined(__clang__)
#define MIOPEN_EXPORT __attribute__((visibility("default")))
#else
#define MIOPEN_EXPORT
#endif

#endif /* MIOPEN_EXPORT_H_ */
