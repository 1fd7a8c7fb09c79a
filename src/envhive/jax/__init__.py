"""envhive's JAX support: pools stepped inside ``jax.jit`` (``env.xla()``).

``envhive.make(...).xla()`` returns EnvPool's ``(handle, recv, send, step)``, built on
``jax.ffi`` handlers compiled with envhive (``_xla.cpp``, against the vendored XLA FFI headers
in ``include/xla``; the build needs no jax). Importing this package imports no jax: only
``xla()`` does (``_ffi.py``), and it needs the ``jax`` extra (``pip install 'envhive[jax]'``).
The pool lent to XLA and the hand-overs between Python and XLA calls: ``_lease.py``.
[JAX](../../docs/jax.md) is the user's guide.
"""
