"""`conflux.FusionPlan`: MIOpen's Fusion API for full control — ops added in order on
template arrays (their lengths, types and layouts are what the plan is compiled for),
compiled once for a device, executed with new arrays of the same specs."""

from . import _arrays, _device
from ._conflux import Error, FusionPlan as _Plan
from ._functional import activation_params, conv_geometry, per_channel


class FusionPlan:
    """Example::

        plan = conflux.FusionPlan(x)                 # x: a template input
        plan.add_conv(w, padding=1); plan.add_bias(b); plan.add_activation("relu")
        plan.compile()                               # the device comes from x
        y = plan.execute(x, [w, b, None])            # one argument per op, in op order

    Op arguments: conv → w; bias → b; batch_norm → (mean, var, scale, shift, eps);
    add → z (or (z, α)); activation → None (the parameters given when it was added)."""

    def __init__(self, x):
        x = _arrays.usable(x)
        self._x = _arrays.view(x, "fusion plan", "x")
        self._x.owner = None  # only the template's spec is kept
        self._plan = _Plan(self._x.spec())
        self._ops = []  # (kind, activation params or α)
        self._k = None

    @property
    def device(self):
        return self._x.device

    def _add(self, kind, index, extra=None):
        self._ops.append((kind, extra))
        return index

    def add_conv(self, w, stride=1, padding=0, dilation=1, groups=1, tf32=None):
        wv = _arrays.view(_arrays.usable(w), "fusion plan", "conv w")
        stride, padding, dilation = conv_geometry(self._x.shape, wv.shape, stride, padding, dilation)
        self._k = wv.shape[0]
        return self._add("conv", self._plan.add_conv(wv.spec(), padding, stride, dilation, groups, tf32))

    def _channel_spec(self, v, what):
        k = self._plan.output_spec()[1][1]
        if v.shape != [k]:
            raise Error(f"miopenStatusBadParm: fusion plan: {what} must have {k} values, got lengths {v.shape}")
        return per_channel(v, k)

    def add_bias(self, b):
        v = _arrays.view(b, "fusion plan", "bias")
        return self._add("bias", self._plan.add_bias(self._channel_spec(v, "bias")))

    def add_batch_norm(self, mean):
        """Spatial batch-norm inference; `mean` is a template of one per-channel vector."""
        v = _arrays.view(mean, "fusion plan", "bn mean")
        return self._add("batch_norm", self._plan.add_bn_inference(True, self._channel_spec(v, "batch-norm parameter")))

    def add_add(self):
        """Residual add of a tensor with the plan's output spec."""
        return self._add("add", self._plan.add_tensor_add(self._plan.output_spec()))

    def add_activation(self, activation):
        act = activation_params(activation)
        if act is None:
            raise ValueError("conflux: add_activation needs an activation")
        return self._add("activation", self._plan.add_activation(act[0]), act)

    def compile(self):
        self._plan.compile(_device.handle(self.device))
        return self

    @property
    def solver(self):
        """The solver the compiled plan runs."""
        return self._plan.solver_name()

    def output_spec(self):
        """(lengths, strides) of the output the plan writes."""
        _, shape, strides = self._plan.output_spec()
        return shape, strides

    def execute(self, x, args, out=None):
        """Run on `x` with one argument per op; writes `out` (allocated when None) and returns it."""
        if len(args) != len(self._ops):
            raise Error(f"miopenStatusBadParm: fusion plan: {len(self._ops)} ops need {len(self._ops)} arguments, got {len(args)}")
        keep = []
        xv = _arrays.view(x, "fusion plan execute", "x")
        if xv.device != self.device:
            raise Error(f"miopenStatusBadParm: fusion plan execute: x is on {xv.device}, the plan was compiled for {self.device}")
        op_args = []
        for i, ((kind, extra), a) in enumerate(zip(self._ops, args)):
            what = f"op {i} ({kind})"
            if kind == "activation":
                op_args.append(("activation", extra[1], extra[2], extra[3]))
                continue
            if kind == "batch_norm":
                mean, var, scale, shift, eps = a
                vs = [_arrays.view(t, "fusion plan execute", f"{what} {n}") for t, n in ((scale, "scale"), (shift, "shift"), (mean, "mean"), (var, "var"))]
                keep.append(vs)
                op_args.append(("bn_inference", *[v.ptr for v in vs], float(eps)))
                continue
            alpha = 1.0
            if kind == "add" and isinstance(a, tuple):
                a, alpha = a
            v = _arrays.view(a, "fusion plan execute", what)
            keep.append(v)
            op_args.append({"conv": ("conv", v.ptr, 1.0, 0.0), "bias": ("bias", v.ptr), "add": ("add", v.ptr, float(alpha))}[kind])
        shape, strides = self.output_spec()
        if out is None:
            out = _arrays.empty_like_kind(x, shape, strides)
        yv = _arrays.view(out, "fusion plan execute", "out")
        if yv.shape != shape or yv.strides != strides:
            raise Error(f"miopenStatusBadParm: fusion plan execute: out has lengths {yv.shape} strides {yv.strides}, the plan writes {shape} strides {strides}")
        _device.queue(self.device, lambda h: self._plan.execute(h, xv.spec(), xv.ptr, yv.spec(), yv.ptr, op_args))
        return out
