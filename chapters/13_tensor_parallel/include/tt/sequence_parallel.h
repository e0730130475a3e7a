/// @file sequence_parallel.h
/// @brief Sequence parallelism (Korthikanti et al. 2022): the regions between the tensor-
/// parallel layers (LayerNorm, the residual adds, dropout) sharded along the sequence, with an
/// all-gather before each column-parallel layer and a reduce-scatter after each row-parallel one
/// (chapter 13).
///
/// In plain tensor parallelism the activations outside the split layers ([B, T, C]) are
/// replicated on every rank of the group: each rank runs the same LayerNorm on the same data.
/// Sequence parallelism gives rank r only the tokens [r*T/tp, (r+1)*T/tp) of each sequence
/// there ([B, T/tp, C]). The all-reduce g at the end of a row-parallel layer becomes a
/// reduce-scatter (sum, then keep my tokens), and the identity f at the start of a
/// column-parallel layer becomes an all-gather (every rank needs every token). A ring
/// all-reduce is a reduce-scatter followed by an all-gather, so the bytes sent stay the same,
/// while LayerNorm's inputs and outputs and the residual stream shrink by tp.
///
/// | op | forward | backward |
/// |---|---|---|
/// | gather_from_sequence | all-gather along T | reduce-scatter along T (sum) |
/// | reduce_scatter_to_sequence | reduce-scatter along T (sum) | all-gather along T |
///
/// They are conjugate like f and g. Why the gather's backward sums: the gathered tensor feeds a
/// column-parallel layer, whose input gradient on each rank is only that rank's partial term.
///
/// **Which tokens a rank holds.** Everything in the sharded regions works token by token, so any
/// split of the B*T tokens gives the same result. `dim` picks one: 1 (the default) splits every
/// sequence, T/tp tokens each, as Korthikanti et al. do in Megatron's [T, B, C] layout; in this
/// project's [B, T, C] layout the collectives then move the rank dim (a permute, one copy on
/// each side). 0 gives each rank B/tp whole sequences, where the collective's concatenation
/// already is the layout: no copy. TensorParallelGPT2 takes dim 0 when tp divides B.
#pragma once

#include "tt/dist.h"
#include "tt/tensor.h"

namespace tt::tp {

/// All-gather along the token dim `dim` (1: the sequence, 0: whole sequences): x [B, S, ...] on
/// every rank -> [B, tp*S, ...], rank r's tokens at [r*S, (r+1)*S) (dim 0: [tp*B, S, ...]);
/// backward reduce-scatters the gradient (exercise ch13.5). Throws tt::Error when x has fewer
/// than 2 dims or dim is not 0 or 1.
Tensor gather_from_sequence(const Tensor& x, dist::ProcessGroup& group, int64_t dim = 1);

/// Sum over the group, then this rank's tokens along `dim`: x [B, T, ...] -> [B, T/tp, ...], the
/// tokens [r*T/tp, (r+1)*T/tp) of the sum (dim 0: the sequences [r*B/tp, (r+1)*B/tp));
/// backward all-gathers the gradient (exercise ch13.5). Throws tt::Error when tp does not
/// divide x.size(dim).
Tensor reduce_scatter_to_sequence(const Tensor& x, dist::ProcessGroup& group, int64_t dim = 1);

/// This rank's tokens of a replicated x [B, T, ...] along `dim` (no communication): [B, T/tp,
/// ...]; backward all-gathers the gradient. Enters the sequence-parallel region from replicated
/// data (tests). Throws tt::Error when tp does not divide x.size(dim).
Tensor split_to_sequence(const Tensor& x, dist::ProcessGroup& group, int64_t dim = 1);

/// The collective behind gather_from_sequence, without autograd: [B, S, ...] -> [B, tp*S, ...]
/// (an all-gather into [tp, B, S, ...], then the rank dim moved next to dim `dim`: a copy for
/// dim 1, none for dim 0).
Tensor sequence_all_gather(const Tensor& x, dist::ProcessGroup& group, int64_t dim = 1);
/// The collective behind reduce_scatter_to_sequence, without autograd: [B, T, ...] ->
/// [B, T/tp, ...] (the rank's tokens moved to the front, [tp, B, T/tp, ...]: a copy for dim 1,
/// none for dim 0; then a reduce-scatter). Throws tt::Error when tp does not divide x.size(dim).
Tensor sequence_reduce_scatter(const Tensor& x, dist::ProcessGroup& group, int64_t dim = 1);

}  // namespace tt::tp
