"""The one exception type that reaches the user as a single line and exit code 2, and the checks that raise it for
settings read from the environment."""

import os


class UsageError(Exception):
    """Bad input: the message names the problem and the fix. The CLI prints it on one line and exits 2."""

    exit_code = 2


def cuda_error(e: Exception) -> str | None:
    """One line for an error raised by the GPU (a kernel fault, an out-of-memory), None for anything else."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    module = type(e).__module__ or ""
    if module.startswith("cupy") or type(e).__name__ in ("AcceleratorError", "OutOfMemoryError") or "CUDA error" in text:
        return (f"the GPU reported: {text}; run the implementation under compute-sanitizer "
                "(scripts/sanitize.sh) to find the faulting access, or use a smaller --size for out-of-memory")
    return None


def positive_env(name: str, default: float, unit: str, example: str) -> float:
    """$name as a positive finite number (default when unset or blank); anything else is a UsageError naming it."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise UsageError(f"${name}={raw[:40]} is not a positive number of {unit}; set it like {example}, or unset it")
    return value
