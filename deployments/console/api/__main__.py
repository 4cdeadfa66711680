"""``python -m payops.deployments.console.api``: write the API's OpenAPI document into the repository."""

from . import write_contract

if __name__ == "__main__":
    print(f"written: {write_contract()}")
