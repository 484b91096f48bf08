"""`python -m recipes.translate`; see `recipes.translate.train`."""

import sys

from recipes.translate.train import main

if __name__ == "__main__":
    sys.exit(main())
