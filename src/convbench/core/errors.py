"""The one exception type that reaches the user as a single line and exit code 2."""


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
