"""`convbench train NET`: train our own weights and save them as safetensors with their Correctness."""

from __future__ import annotations

from pathlib import Path

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.core.spec import get_network
from convbench.measure import outfiles
from convbench.network.train import evaluate, train
from convbench.network.weights import (
    OWN_DIR,
    STORAGE_DTYPE,
    VARIANTS,
    for_storage,
    load_safetensors,
    own_weights_file,
    save_safetensors,
)


def cmd_train(args) -> int:
    spec = get_network(args.net)
    variant = args.variant
    if variant is None and spec.name in VARIANTS:
        variant = VARIANTS[spec.name][0]
    fname = own_weights_file(spec.name, variant)
    out = Path(args.out) if args.out else Path(fname)
    if out.is_dir():
        out = out / fname
    if out.suffix != ".safetensors":
        raise UsageError(f"--out {out}: weights are saved as .safetensors; name the file NAME.safetensors or give a folder")
    outfiles.check_output_file(out, "--out")  # before 20 s of training: folder writable, not a symlink or device

    shipped = OWN_DIR / fname  # read before saving: --out may be the shipped file itself
    ref = load_safetensors(Path(str(shipped)), fname).metadata if shipped.is_file() else {}

    params, metadata = train(spec, variant, seed=args.seed, epochs=args.epochs, data_dir=args.data_dir)
    params = for_storage(params)
    scores = evaluate(spec, params, data_dir=args.data_dir)
    metadata.update({f"correctness_{n}": repr(acc) for n, acc in scores.items()})
    with outfiles.temp_beside(out, "--out") as tmp:  # removed on every way out, SIGTERM included
        try:
            save_safetensors(tmp, spec, params, metadata, dtype=STORAGE_DTYPE)
        finally:
            tmp.with_name(tmp.name + ".tmp").unlink(missing_ok=True)  # save_safetensors' own temporary name

    for n, acc in scores.items():
        line = f"Correctness at {n}: {acc!r}"
        if f"correctness_{n}" in ref:
            line += f"  (shipped {ref[f'correctness_{n}']}, delta {acc - float(ref[f'correctness_{n}']):+.4f})"
        print(line)
    ui.note(f"saved {out}")
    return 0
