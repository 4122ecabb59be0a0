"""`fuse(model)`: find Conv2d → BatchNorm2d → (+ residual) → activation chains in an eval-mode
model's fx graph and run each as one conflux kernel; everything else stays PyTorch."""

import copy
import operator

import torch
from torch import fx, nn
import torch.nn.functional as F

from ._modules import FusedConv2d
from ._tune import choose_by_timing, compile_all, summary

_ADDS = (operator.add, operator.iadd, torch.add)


def _activation_of_module(m):
    """The conflux activation a module computes, or (None, reason) when it has none."""
    if isinstance(m, nn.ReLU):
        return "relu", None
    if isinstance(m, nn.ReLU6) or (isinstance(m, nn.Hardtanh) and m.min_val == 0.0 and m.max_val == 6.0):
        return "relu6", None
    if isinstance(m, nn.LeakyReLU):
        return ("leaky_relu", m.negative_slope), None
    if isinstance(m, nn.Sigmoid):
        return "sigmoid", None
    if isinstance(m, nn.Tanh):
        return "tanh", None
    if isinstance(m, nn.ELU):
        return ("elu", m.alpha), None
    if isinstance(m, nn.GELU):
        return ("gelu_tanh" if m.approximate == "tanh" else "gelu"), None
    for cls, name in ((nn.SiLU, "silu"), (nn.Hardswish, "hardswish"), (nn.Hardsigmoid, "hardsigmoid"), (nn.Mish, "mish")):
        if isinstance(m, cls):
            return name, None
    return None, None


def _activation_of_function(node):
    f = node.target
    if f in (F.relu, torch.relu):
        return "relu"
    if f in (F.relu6,):
        return "relu6"
    if f in (torch.sigmoid, F.sigmoid):
        return "sigmoid"
    if f in (torch.tanh, F.tanh):
        return "tanh"
    if f is F.gelu:
        return "gelu_tanh" if node.kwargs.get("approximate", "none") == "tanh" else "gelu"
    named = {F.silu: "silu", F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid", F.mish: "mish"}
    return named.get(f)


class _Census:
    def __init__(self):
        self.fused = []  # (conv name, chain, kept in PyTorch after timing)
        self.unfused = []  # (conv name, reason)
        self.notes = []

    def text(self, total):
        on = [(n, c) for n, c, kept in self.fused if not kept]
        lines = [f"conflux.torch.fuse: {len(on)} of {total} convolutions run on conflux"]
        for name, chain, kept in self.fused:
            lines.append(f"  {'kept' if kept else 'fused':<10} {name}: {chain}" + (" (PyTorch was faster on the example input)" if kept else ""))
        for name, reason in self.unfused:
            lines.append(f"  not fused  {name}: {reason}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _comes_before(a, b):
    """True when node a precedes node b in the graph's order."""
    cur = a.next
    while cur.op != "root":
        if cur is b:
            return True
        cur = cur.next
    return False


def _conv_refusal(conv):
    if conv.padding_mode != "zeros":
        return f"padding_mode={conv.padding_mode!r} (conflux pads with zeros only)"
    if isinstance(conv.padding, str) and conv.padding == "same" and any((d * (k - 1)) % 2 for d, k in zip(conv.dilation, conv.kernel_size)):
        return "padding='same' with an even filter extent needs asymmetric padding"
    return None


def _fuse_graph(gm, census, constant_weights):
    modules = dict(gm.named_modules())
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(modules.get(node.target), nn.Conv2d):
            continue
        conv = modules[node.target]
        refusal = _conv_refusal(conv)
        if refusal:
            census.unfused.append((node.target, refusal))
            continue
        chain = ["Conv2d" + ("+bias" if conv.bias is not None else "")]
        last, bn, act, residual = node, None, None, None
        nxt = _only_user(last)
        if nxt is not None and nxt.op == "call_module" and isinstance(modules.get(nxt.target), nn.BatchNorm2d):
            m = modules[nxt.target]
            if m.training or not m.track_running_stats:
                census.notes.append(f"{nxt.target}: BatchNorm2d in training mode or without running statistics stays PyTorch")
            else:
                bn, last = m, nxt
                chain.append("BatchNorm2d")
                nxt = _only_user(last)
        if nxt is not None and nxt.op == "call_function" and nxt.target in _ADDS and len(nxt.args) == 2 and not nxt.kwargs:
            other = nxt.args[1] if nxt.args[0] is last else nxt.args[0]
            # The residual must exist before the convolution runs: the add joins the branch
            # computed last, and the other branch becomes the residual.
            if isinstance(other, fx.Node) and other is not last and _comes_before(other, node):
                residual, last = other, nxt
                chain.append("add")
                nxt = _only_user(last)
        why_not = None
        if nxt is not None:
            if nxt.op == "call_module" and nxt.target in modules:
                act, why_not = _activation_of_module(modules[nxt.target])
            elif nxt.op == "call_function":
                act = _activation_of_function(nxt)
            if act is not None:
                last = nxt
                chain.append(act if isinstance(act, str) else act[0])
        if why_not:
            census.notes.append(f"{node.target}: {why_not}; the activation stays PyTorch")
        name = _fused_name(node.target)
        text = " → ".join(chain)
        gm.add_submodule(name, FusedConv2d(conv, bn, act, residual is not None, chain=text, constant_weights=constant_weights))
        with gm.graph.inserting_after(last):
            args = (node.args[0], residual) if residual is not None else (node.args[0],)
            fused = gm.graph.call_module(name, args)
        last.replace_all_uses_with(fused)
        # Erase the chain from its end back to the convolution.
        cur = last
        while True:
            prev = None
            if cur is not node:
                prev = cur.args[0] if cur.args and isinstance(cur.args[0], fx.Node) and cur.args[0] is not residual else cur.args[1]
            gm.graph.erase_node(cur)
            if cur is node:
                break
            cur = prev
        census.fused.append((node.target, text, False))
        count += 1
    gm.graph.lint()
    gm.recompile()
    return count


def _fused_name(conv_name):
    return conv_name.replace(".", "_") + "_conflux"


def _count_convs(model):
    return sum(isinstance(m, nn.Conv2d) for m in model.modules())


def fuse(model, report=False, constant_weights=False, example_input=None, tune=True):
    """A copy of the eval-mode `model` whose Conv2d → BatchNorm2d → (+ residual) → activation
    chains run as fused conflux kernels (CPU or CUDA, fp32/fp16/bf16, NCHW or channels_last).
    The result computes what the model computes. `report=True` prints what was fused, what
    was not and why; the census is also kept as `result.conflux_census` (text).

    `constant_weights=True` promises that convolution weights are not changed in place after
    fusing (frozen inference, as torch.compile's freezing assumes): the CPU keeps each
    layer's transformed filter instead of re-deriving it per call. A rewrite that misses the
    64 sampled words it checks per call is not seen. The result holds copies of the parameters.

    `example_input` (a tensor, or a tuple of forward's arguments): compile every chain's plan
    for the shapes it gives, several at once, then run the model once on it and time every
    fused chain against the same chain in PyTorch, on the tensors it really
    receives; each chain then runs where it was faster (the census says which stayed
    PyTorch). Shapes other than the example's keep the choice made for the example.
    `tune=False`: only compile the plans for the example's shapes (no timing)."""
    if model.training:
        raise ValueError("conflux.torch.fuse: the model is in training mode; call model.eval() first (batch-norm is fused with its running statistics)")
    total = _count_convs(model)
    census = _Census()
    try:
        gm = fx.symbolic_trace(copy.deepcopy(model))
    except Exception as e:  # tracing limits of fx (data-dependent control flow): nothing fused, say why
        census.notes.append(f"torch.fx could not trace the model ({type(e).__name__}: {e}); nothing was fused")
        out = copy.deepcopy(model)
        out.conflux_census = census.text(total)
        if report:
            print(out.conflux_census)
        return out
    _fuse_graph(gm, census, constant_weights)
    if example_input is not None:
        compile_all(gm, example_input)
        if tune:
            line, kept = summary(choose_by_timing(gm, example_input))
            census.notes.append(line)
            census.fused = [(n, c, _fused_name(n) in kept) for n, c, _ in census.fused]
    gm.delete_all_unused_submodules()
    modules = dict(gm.named_modules())
    left = sorted(
        {type(modules[n.target]).__name__ for n in gm.graph.nodes if n.op == "call_module" and not isinstance(modules[n.target], FusedConv2d)}
        | {getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes if n.op in ("call_function", "call_method")}
    )
    if left:
        census.notes.append("left in PyTorch: " + ", ".join(left))
    gm.conflux_census = census.text(total)
    if report:
        print(gm.conflux_census)
    return gm
