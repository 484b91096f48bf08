"""`python -m recipes.dialogue`; see `recipes.dialogue.train`."""

import sys

from recipes.dialogue.train import main

if __name__ == "__main__":
    sys.exit(main())
