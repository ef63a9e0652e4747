"""Torch building blocks that the torch families share; ``pip install "rlx-core[torch]"``.

- :mod:`rlx.nn.state`: modules, optimisers and generators to and from checkpoint arrays;
  devices and thread counts;
- :mod:`rlx.nn.layers`: MLP and Nature-CNN bodies, initialisation, a user's network factory;
- :mod:`rlx.nn.distributions`: action distributions over tensors, with NumPy twins;
- :mod:`rlx.nn.renorm`: batch renormalisation and an MLP normalised with it;
- :mod:`rlx.nn.optim`: flat-vector Adam and RMSprop, gradient clipping, one gradient step,
  and optimisers by name.

Only a family that uses torch imports this package: ``import rlx`` and ``rlx list`` never do.
"""
