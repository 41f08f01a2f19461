"""onnxruntime's sessions as the ONNX peers run them (onnx_resnet50.py, onnx_gpt.py): the CPU
provider, and the CUDA provider with TF32 off when this onnxruntime has it."""


def ort_sessions(onnx_path):
    """Yields (provider name, session or the exception that made it fail) for each provider."""
    import onnxruntime as ort
    providers = [("CPUExecutionProvider", {})]
    if "CUDAExecutionProvider" in ort.get_available_providers():
        providers.append(("CUDAExecutionProvider", {"use_tf32": 0}))
    for name, options in providers:
        try:
            try:
                sess = ort.InferenceSession(onnx_path, providers=[(name, options)])
            except Exception:  # an older onnxruntime without the use_tf32 option
                sess = ort.InferenceSession(onnx_path, providers=[name])
            yield name, sess
        except Exception as e:  # noqa: BLE001 - the caller reports it
            yield name, e
