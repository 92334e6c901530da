"""The recipe format's step kinds, one module each; `registry.py` lists them."""
