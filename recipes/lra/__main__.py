"""`python -m recipes.lra`; see `recipes.lra.train`."""

import sys

from recipes.lra.train import main

if __name__ == "__main__":
    sys.exit(main())
