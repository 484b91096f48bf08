"""`python -m recipes.glue`; see `recipes.glue.train`."""

import sys

from recipes.glue.train import main

if __name__ == "__main__":
    sys.exit(main())
