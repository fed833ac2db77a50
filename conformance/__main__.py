import sys

try:
    from conformance.cli import main
except ImportError as error:
    if error.name != "loader":
        raise
    # The loader cannot be imported (an unbuilt source checkout, or no install): its message
    # says why and what to do, without a traceback.
    sys.exit(f"python -m conformance: {error}")

sys.exit(main())
