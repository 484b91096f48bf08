"""`python -m recipes.lm`; see `recipes.lm.train`."""

import sys

from recipes.lm.train import main

if __name__ == "__main__":
    sys.exit(main())
