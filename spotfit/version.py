"""spotfit's version, in a module of its own: what reads it (the wheel a cloud instance installs,
`backends/wheel.py`) imports nothing else of the package with it.

>>> __version__.count(".") >= 2
True
"""

__version__ = "0.1.0"
