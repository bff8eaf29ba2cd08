"""A script that fails: the CLI reports the script's own failure."""


def fail() -> None:
    raise ValueError("the script failed on purpose")


if __name__ == "__main__":
    fail()
