"""The decoding figures of a GPT-2 peer (pytorch_gpt2.py decode, jax_gpt2.py decode) as one JSON
file for the abstraction-cost study's page (tools/study/make_page.py), in the shape strata's
gpt2_forward --json writes its ways, so the page reads both alike. Standard library only: the
frameworks' scripts import it, whatever else they have."""
import json
import os
import statistics


def write(path, framework, device, precision, config, new_tokens, prompt_tokens, rounds, times, same):
    """times: {form: [ms per token of each round, in the order measured]};
    same: {form: whether its tokens equal the first form's}."""
    doc = {"framework": framework, "device": device, "precision": precision, "config": config,
           "new_tokens": new_tokens, "prompt_tokens": prompt_tokens, "rounds": rounds,
           "forms": [{"form": name, "ms_per_token_by_round": ms, "ms_per_token_median": statistics.median(ms),
                      "same_tokens_as_first": bool(same[name])} for name, ms in times.items()]}
    # Written whole or not at all: a run cut short by the part's deadline leaves no half file.
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
