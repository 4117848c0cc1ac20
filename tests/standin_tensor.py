"""The tensors of the stand-in ``torch`` (and ``jax``) packages, as module source text.

A stand-in tensor is a list of floats with what the in-image check's compile step uses: ``arange``, ``sin``,
``*``, ``+``, ``allclose`` and ``float32``.  The integration stand-in wheels
(:func:`tests.integration.support.wheels.torch_standin_files`) install it as ``torch/_standin_tensor.py``; the
unit tests of the compile step (``tests/unit/imagecheck/test_check_compile.py``) put it under their stand-in
``torch`` and ``jax`` packages.  Keep the text stable: it is part of the stand-in wheels' bytes, so a change makes
every integration image that installs them rebuild.
"""

TENSOR_SOURCE = '''import math

float32 = "float32"


class Tensor:
    def __init__(self, values, device="cpu"):
        self.values, self.device = [float(v) for v in values], device

    def _zip(self, other, op):
        theirs = other.values if isinstance(other, Tensor) else [other] * len(self.values)
        return Tensor(map(op, self.values, theirs), self.device)

    def __mul__(self, other):
        return self._zip(other, lambda a, b: a * b)

    def __add__(self, other):
        return self._zip(other, lambda a, b: a + b)


def arange(n, dtype=None, device="cpu"):
    return Tensor(range(n), device)


def sin(x):
    return Tensor(map(math.sin, x.values), x.device)


def allclose(a, b):
    return len(a.values) == len(b.values) and all(abs(p - q) <= 1e-6 for p, q in zip(a.values, b.values))
'''
