"""`python -m recipes.pretrain`; see `recipes.pretrain.train`."""

import sys

from recipes.pretrain.train import main

if __name__ == "__main__":
    sys.exit(main())
