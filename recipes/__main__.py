"""`python -m recipes`: lists the recipes (`recipes.registry`)."""

import sys

from recipes import registry

if __name__ == "__main__":
    print(registry.listing())
    sys.exit(0)
