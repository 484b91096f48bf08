"""`python -m recipes.benchmark`: see `recipes.benchmark`."""

import sys

from recipes.benchmark.runner import main

if __name__ == "__main__":
    sys.exit(main())
