"""`python -m recipes.summarize`; see `recipes.summarize.train`."""

import sys

from recipes.summarize.train import main

if __name__ == "__main__":
    sys.exit(main())
