"""Ordered rule tables that sort GPU kernel names, and ATen operator names, into categories.

Kernel names come from Kineto (``torch.profiler``) device events, demangled or mangled; every rule is a regular
expression searched (``re.search``) in the name, and **the first matching rule wins**. Order matters:

1. memcpy/memset and communication first (Kineto names ``Memcpy HtoD (...)``, ``Memset (Device)``, ``ncclKernel_*``);
2. Triton/Inductor-generated kernels (``triton_{poi,red,per,tem,for}_fused_*``) before any semantic rule, since their
   fused names contain op names such as ``softmax``; Inductor *templates* (``triton_tem_``) count by what they compute
   (mm -> GEMM, conv -> convolution, attention -> attention);
3. attention before everything else of the compute rules (FlashAttention, memory-efficient ``fmha_cutlass*``, cuDNN
   SDPA names contain ``gemm``, ``softmax`` or ``reduce``);
4. cuDNN batch-norm kernels (``cudnn::bn_*``) before convolution, and convolution before GEMM (cuDNN conv kernels
   are ``*_implicit_gemm_*``);
5. GEMM (cuBLAS, cuBLASLt, CUTLASS, Hopper ``nvjet_*``), then embedding, normalization, softmax, reduction (reductions,
   scans, sorts and pooling: cub device-wide primitives and ATen ``Reduce.cuh``), elementwise;
6. anything else is ``other``, and its share is reported.

A kernel name that no rule matches can still be sorted by the ATen operator that launched it
(:func:`classify_kernel` with ``op=``); the GPU records keep that operator for review. That fallback hides what the
name rules miss, so :func:`classify_kernel_source` also says *how* a name was sorted (``"name_rule"``,
``"op_fallback"``, ``"op_rule"`` for ATen-operator rows, ``"none"``), and the reports give the share of time by each
(``kbstudy.analysis.profiles.classification_table``): "other" is judged on the name rules alone.
"""

from __future__ import annotations

import functools
import re

#: Categories in display order.
CATEGORIES = (
    "gemm", "attention", "convolution", "embedding", "normalization", "softmax", "reduction", "elementwise", "triton",
    "memcpy", "communication", "other",
)
#: Human-readable labels for tables and figures.
CATEGORY_LABELS = {
    "gemm": "GEMM (cuBLAS/CUTLASS)",
    "attention": "attention (Flash/SDPA)",
    "convolution": "convolution (cuDNN)",
    "embedding": "embedding",
    "normalization": "normalization",
    "softmax": "softmax",
    "reduction": "reduction/scan/sort",
    "elementwise": "elementwise/copy",
    "triton": "Triton/Inductor",
    "memcpy": "memcpy/memset",
    "communication": "communication",
    "other": "other",
}

#: (category, pattern, why/source), in match order. Patterns are case-sensitive unless they start with ``(?i)``.
KERNEL_RULES: tuple[tuple[str, str, str], ...] = (
    ("memcpy", r"^(Memcpy|Memset)|^(cuda)?[Mm]em(cpy|set)", "Kineto memcpy/memset activities (HTA types.py)"),
    ("communication", r"^nccl|ncclDevKernel|ncclKernel", "NCCL collectives (HTA types.py)"),
    ("gemm", r"^triton_tem_fused_.*(?:mm|addmm|bmm|_scaled_mm)", "Inductor GEMM template: a GEMM by semantics"),
    ("convolution", r"^triton_tem_fused_.*conv", "Inductor convolution template"),
    ("attention", r"^triton_tem_fused_.*(?:attention|flex)", "Inductor flex-attention template"),
    ("triton", r"^triton_|^triton__", "Inductor-generated Triton: triton_{poi,red,per,tem,for}_fused_<ops>_<n>"),
    ("attention",
     r"flash_fwd|flash_bwd|pytorch_flash|FlashAttn|flash::|fmha|MemEffAttention|AttentionKernel|AttentionBackwardKernel"
     r"|native_sdpa|_sdpa_|sdpa_|flash_fprop|flash_bprop|(?i:attention)"
     r"|philox::unpack_cudnn|cudnn::fusion::(?:compute_dot_do_o|convert_dq|lean_)",
     "FlashAttention 2/3, memory-efficient (fmha_cutlass*), cuDNN SDPA (PyTorch aten/.../transformers/cuda) and "
     "its helpers: the dropout-seed unpack of ATen's cuDNN attention (at::cuda::philox::unpack_cudnn), the cuDNN "
     "SDPA backward pre/post-processing (cudnn::fusion::compute_dot_do_o_*, convert_dq_to_16bits) and the "
     "LeanAttention split reduction (cudnn::fusion::lean_reduction_kernel); before convolution ('cudnn')"),
    ("normalization", r"cudnn::bn_|bn_fw_|bn_bw_|batch_norm|BatchNorm|batchnorm",
     "batch norm (ATen Normalization.cuh, cuDNN bn_*), before convolution: cuDNN names"),
    ("convolution",
     r"fprop|dgrad|wgrad|implicit_gemm|implicit_convolve|convolve_|winograd|Winograd|xmma_cudnn|_cudnn|cudnn"
     r"|nchwToNhwc|nhwcToNchw|conv2d|conv_depthwise|depthwise|im2col|col2im|_conv_|Conv2d",
     "cuDNN convolution (fprop/dgrad/wgrad implicit GEMM), layout helpers; before GEMM"),
    ("gemm",
     r"nvjet|(?i:gemm)|cutlass|cublas|gemv|splitKreduce|s16816|s1688|s161616|xmma_|dot_kernel|gemmk1|gemmSN"
     r"|(?i:matmul)",
     "cuBLAS/cuBLASLt (incl. Hopper nvjet_*), CUTLASS (cutlass3x_sm90_*, cutlass::Kernel2<...>)"),
    ("embedding",
     r"(?i:embedding)|compute_grad_weight|krn_partials_per_segment|krn_partial_segment_offset|sum_and_scatter"
     r"|compute_num_of_partial_segments|indexSelect(Large|Small)Index|split_embedding|int_nbit_split|coalesce",
     "ATen EmbeddingBag.cu / Embedding.cu / EmbeddingBackwardKernel.cuh / Indexing.cu; FBGEMM TBE; sparse-gradient "
     "coalescing (only the embedding tables have sparse gradients in these workloads)"),
    ("normalization",
     r"layer_norm|LayerNorm|layernorm|group_norm|GroupNorm|rms_norm|RMSNorm|RmsNorm|RowwiseMoments|GammaBetaBackward"
     r"|ComputeInternalGradients|instance_norm|InstanceNorm",
     "ATen layer/group/RMS norm kernels (Normalization.cuh, layer_norm_kernel.cu)"),
    ("softmax", r"(?i:softmax)", "PersistentSoftmax.cuh, SoftMax.cu (incl. log-softmax of cross-entropy)"),
    ("elementwise",
     r"indexFunc(Large|Small)Index|index_elementwise_kernel|indexing_backward_kernel|scatter_gather_elementwise"
     r"|vectorized_gather_kernel",
     "ATen Indexing.cu / ScatterGatherKernel.cu (index_add/index_copy/index_put/scatter/gather), before reduction: "
     "their functor names (ReduceAdd, ReduceMultiply) would hit the reduction rule"),
    ("reduction",
     r"reduce_kernel|Reduce|reduce|RadixSort|radixSort|DeviceScan|DeviceSelect|DeviceSegmented|scan_|_scan|Scan"
     r"|sort|Sort|topk|TopK|nll_loss|cross_entropy|cumsum|cumprod|unique|(?i:pool)|histogram|argmax|argmin",
     "ATen Reduce.cuh, cub device-wide reduce/scan/sort/select, loss reductions, pooling"),
    ("elementwise",
     r"elementwise|Elementwise|vectorized|unrolled|CatArrayBatchedCopy|multi_tensor_apply|distribution|fill|Fill"
     r"|copy|Copy|index_|indexFunc|indexAdd|indexCopy|indexing_backward|scatter|gather|masked|where|dropout"
     r"|Dropout|philox|triu|tril|arange|clamp|upsample|roll|flip|_foreach|fused_adam|FusedAdam|fused_sgd|FusedSgd"
     r"|(?i:adagrad)|transpose|permute|cat_|stack_|pad_|amp_|cub::detail::transform::|DeviceTransform",
     "ATen CUDALoops.cuh, MultiTensorApply.cuh (foreach and fused optimizers), Indexing.cu, Dropout.cu, Shape.cu; "
     "cub DeviceTransform (thrust::transform/sequence, e.g. inside sparse coalesce)"),
)

#: (category, pattern) over ATen operator names without the ``aten::`` prefix (``aten::addmm`` -> ``addmm``), in
#: match order; each pattern must match the whole name (``re.fullmatch``).
OP_RULES: tuple[tuple[str, str], ...] = (
    ("communication", r"(c10d|_c10d_functional)::.*|.*(all_reduce|allreduce|all_gather|allgather|reduce_scatter|broadcast).*"),
    ("attention", r"_?scaled_dot_product.*|_flash_attention.*|_efficient_attention.*|_cudnn_attention.*"
                  r"|_native_multi_head_attention|_transformer_encoder_layer_fwd|_fused_sdp_choice"),
    ("convolution", r"_?convolution.*|conv\d?d|conv_transpose\d?d|cudnn_convolution.*|mkldnn_convolution.*"
                    r"|_slow_conv2d.*|slow_conv.*|thnn_conv.*|_nnpack_spatial_convolution|miopen_convolution.*"
                    r"|_conv_depthwise2d.*|conv_depthwise.*|im2col|col2im"),
    ("gemm", r"mm|addmm|_addmm_activation|bmm|baddbmm|addbmm|matmul|linear|mv|addmv|dot|vdot|_scaled_mm|einsum"
             r"|_int_mm|mkldnn_linear|_mkldnn_.*mm.*|tensordot|outer|ger"),
    ("embedding", r"embedding.*|_embedding.*|embedding_bag|_embedding_bag.*|index_select|_coalesce|coalesce"
                  r"|sparse_mask|_sparse_.*|_indices|_values|sparse_coo_tensor|_to_sparse.*|_sparse_coo_tensor.*"),
    ("normalization", r"layer_norm|native_layer_norm.*|batch_norm.*|native_batch_norm.*|_native_batch_norm.*"
                      r"|_batch_norm.*|cudnn_batch_norm.*|miopen_batch_norm.*|group_norm|native_group_norm.*"
                      r"|rms_norm|_fused_rms_norm.*|instance_norm|_batch_norm_impl_index.*|batch_norm_.*"),
    ("softmax", r"_?softmax.*|_?log_softmax.*|_softmax_backward_data|_log_softmax_backward_data"),
    ("reduction", r"sum|mean|max|min|amax|amin|aminmax|argmax|argmin|prod|norm|linalg_vector_norm|var|std|var_mean"
                  r"|std_mean|all|any|logsumexp|nll_loss.*|cross_entropy_loss|binary_cross_entropy.*|mse_loss.*"
                  r"|cumsum|cumprod|sort|argsort|topk|unique.*|_unique.*|kthvalue|median|count_nonzero"
                  r"|max_pool.*|avg_pool.*|adaptive_avg_pool.*|_adaptive_avg_pool.*|adaptive_max_pool.*"
                  r"|max_pool2d_with_indices.*|mkldnn_max_pool.*"),
    ("memcpy", r"_?copy_from.*|_copy_from_and_resize|memcpy.*"),
    ("elementwise", r".*"),  # everything else that survives the view/allocation filter runs elementwise code
)

#: ATen operators that only create views or allocate memory: no kernel runs for them on a GPU, so on CPU their self
#: time is host overhead and is left out of the operator table (reported as unattributed time instead).
VIEW_OR_ALLOC_OPS = frozenset(
    "empty empty_like empty_strided new_empty new_empty_strided resize_ view _unsafe_view reshape as_strided "
    "transpose t permute expand expand_as unsqueeze squeeze slice select split split_with_sizes chunk unbind "
    "narrow detach detach_ alias lift_fresh flatten unflatten contiguous to numpy_T movedim unfold view_as "
    "_reshape_alias set_ result_type is_nonzero item _local_scalar_dense diagonal broadcast_tensors "
    "_has_compatible_shallow_copy_type size stride dim record_stream requires_grad_ retain_grad".split()
)


@functools.lru_cache(maxsize=1)
def _compiled_kernel_rules():
    return tuple((cat, re.compile(pat)) for cat, pat, _ in KERNEL_RULES)


@functools.lru_cache(maxsize=1)
def _compiled_op_rules():
    return tuple((cat, re.compile(pat)) for cat, pat in OP_RULES)


def op_base_name(op: str) -> str:
    """``"aten::addmm"`` -> ``"addmm"``; ``"aten::add_.Tensor"`` -> ``"add_"``; names without a namespace unchanged."""
    name = op.split("::", 1)[1] if "::" in op else op
    return name.split(".", 1)[0]


@functools.lru_cache(maxsize=65536)
def classify_op(op: str) -> str:
    """Category of an ATen operator name (``"aten::addmm"``), by :data:`OP_RULES`.

    The ``prims::``, ``fbgemm::`` and ``c10d::`` namespaces are mapped by their base name too; names in any other
    namespace or none (``autograd::...``, ``ProfilerStep#3``, ``Optimizer.step#...``) are not operators: ``"other"``.
    """
    if not op.startswith(("aten::", "prims::", "fbgemm::", "c10d::", "_c10d_functional::")):
        return "other"
    if op.startswith(("c10d::", "_c10d_functional::")):
        return "communication"
    base = op_base_name(op)
    for cat, rx in _compiled_op_rules():
        if rx.fullmatch(base) or rx.fullmatch(base.rstrip("_")):
            return cat
    return "other"


@functools.lru_cache(maxsize=65536)
def _classify_name(name: str) -> str:
    for cat, rx in _compiled_kernel_rules():
        if rx.search(name):
            return cat
    return "other"


def classify_kernel(name: str, op: str | None = None) -> str:
    """Category of a GPU kernel (or memcpy/memset activity) name, by :data:`KERNEL_RULES` in order.

    If no rule matches and ``op`` (the ATen operator that launched the kernel, e.g. ``"aten::_embedding_bag_backward"``)
    is given, the operator's category (:func:`classify_op`) is used; otherwise ``"other"``.
    """
    cat = _classify_name(name)
    if cat == "other" and op:
        return classify_op(op)
    return cat


#: How a row got its category: a kernel-name rule, the launching operator's category when no name rule matched, an
#: operator rule (rows that are ATen operators: CPU records), or nothing ("other").
SOURCES = ("name_rule", "op_fallback", "op_rule", "none")


def classify_kernel_source(name: str, op: str | None = None) -> tuple[str, str]:
    """``(category, source)`` of a kernel name: what :func:`classify_kernel` returns, and which of
    :data:`SOURCES` decided it (``"name_rule"``, ``"op_fallback"`` or ``"none"``)."""
    cat = _classify_name(name)
    if cat != "other":
        return cat, "name_rule"
    if op:
        cat = classify_op(op)
        if cat != "other":
            return cat, "op_fallback"
    return "other", "none"


def classify_op_source(op: str) -> tuple[str, str]:
    """``(category, source)`` of an ATen operator row (CPU records): source ``"op_rule"``, or ``"none"``."""
    cat = classify_op(op)
    return cat, ("op_rule" if cat != "other" else "none")


#: Inductor's Triton kernel kinds (``torch/_inductor/codegen/triton.py`` prefixes ``triton_<kind>_fused_<ops>_<n>``):
#: ``poi`` pointwise, ``red`` reduction (looped), ``per`` persistent reduction, ``for`` foreach (a combo of pointwise
#: kernels, e.g. a compiled optimizer step), ``tem`` template (GEMM, convolution, flex attention: already sorted by
#: :data:`KERNEL_RULES`).
INDUCTOR_KINDS = {"poi": "elementwise", "red": "reduction", "per": "reduction", "for": "elementwise"}
#: Within an Inductor reduction kernel, the fused operator names that say what it computes (first match wins).
_INDUCTOR_REDUCTION_OPS = (
    ("normalization", re.compile(r"layer_norm|rms_norm|batch_norm|group_norm|native_norm|_norm_")),
    ("softmax", re.compile(r"softmax")),
)
_INDUCTOR_NAME = re.compile(r"^triton_+(poi|red|per|for)_")


def inductor_category(name: str) -> str | None:
    """What an Inductor-generated Triton kernel computes, as one of :data:`CATEGORIES`: pointwise and foreach kernels
    are ``elementwise``; reduction and persistent-reduction kernels are ``normalization`` or ``softmax`` when their
    fused operator names say so (``triton_per_fused_native_layer_norm_2``, ``triton_red_fused__log_softmax_1``),
    else ``reduction``. ``None`` for a name that is not an Inductor pointwise/reduction/foreach kernel (templates are
    sorted by :data:`KERNEL_RULES` already). :func:`classify_kernel` keeps such kernels in ``triton``; this is the
    semantic reading of that category (used by ``kbstudy.analysis.projection``)."""
    m = _INDUCTOR_NAME.match(name)
    if not m:
        return None
    kind = INDUCTOR_KINDS[m.group(1)]
    if kind == "reduction":
        for cat, rx in _INDUCTOR_REDUCTION_OPS:
            if rx.search(name):
                return cat
    return kind


def matching_rule(name: str) -> tuple[str, str, str] | None:
    """The first :data:`KERNEL_RULES` entry whose pattern matches ``name`` (for review), or ``None``."""
    for rule, (_, rx) in zip(KERNEL_RULES, _compiled_kernel_rules()):
        if rx.search(name):
            return rule
    return None


__all__ = ["CATEGORIES", "CATEGORY_LABELS", "KERNEL_RULES", "OP_RULES", "SOURCES", "VIEW_OR_ALLOC_OPS",
           "classify_kernel", "classify_kernel_source", "classify_op", "classify_op_source", "op_base_name",
           "matching_rule", "INDUCTOR_KINDS", "inductor_category"]
