// LSTM and GRU cells on neuron. For every device but the CPU, PyTorch's
// recurrent layers (nn.LSTM, nn.GRU, LSTMCell, GRUCell) call the fused cell
// ops _thnn_fused_lstm_cell and _thnn_fused_gru_cell, which have kernels for
// CUDA only: the CPU fallback would have nothing to run. Here each is written
// as the ATen ops PyTorch's CPU path computes, so every step runs as ops the
// native-op table decides on (natively, or through the tracked fallback).
// The autograd formulas of the fused ops call the *_backward ops below with
// the workspace the forward saved, so both halves agree on its layout.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ATen.h>
#include <torch/library.h>

#include "aten/neuron.h"

namespace neuron_sim {
namespace {

bool has(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

at::Tensor oneMinus(const at::Tensor& t) { return at::rsub(t, 1); }

// LSTM workspace: the activated gates [input, forget, cell, output] (4H).
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                        const at::Tensor& cx,
                                                        const std::optional<at::Tensor>& input_bias,
                                                        const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = input_gates + hidden_gates;
  if (has(input_bias)) gates = gates + *input_bias;
  if (has(hidden_bias)) gates = gates + *hidden_bias;
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// -> (grad of the gates, grad_cx, grad of the bias)
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCellBackward(const std::optional<at::Tensor>& grad_hy,
                                                                const std::optional<at::Tensor>& grad_cy,
                                                                const at::Tensor& cx, const at::Tensor& cy,
                                                                const at::Tensor& workspace, bool has_bias) {
  auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  at::Tensor tanh_cy = cy.tanh();
  at::Tensor gcy = has(grad_cy) ? *grad_cy : at::zeros_like(cy);
  at::Tensor go = at::zeros_like(o);
  if (has(grad_hy)) {
    go = *grad_hy * tanh_cy;
    gcy = gcy + *grad_hy * o * oneMinus(tanh_cy * tanh_cy);
  }
  at::Tensor grad_gates = at::cat({gcy * g * i * oneMinus(i), gcy * cx * f * oneMinus(f), gcy * i * oneMinus(g * g),
                                   go * o * oneMinus(o)},
                                  1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, gcy * f, grad_bias};
}

// GRU workspace: [reset, update, new gate, hidden part of the new gate (bias
// included), hx] (5H).
std::tuple<at::Tensor, at::Tensor> gruCell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                           const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                           const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor ig = has(input_bias) ? input_gates + *input_bias : input_gates;
  at::Tensor hg = has(hidden_bias) ? hidden_gates + *hidden_bias : hidden_gates;
  auto ic = ig.chunk(3, 1), hc = hg.chunk(3, 1);
  at::Tensor r = (ic[0] + hc[0]).sigmoid(), z = (ic[1] + hc[1]).sigmoid();
  at::Tensor n = (ic[2] + r * hc[2]).tanh();
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hc[2], hx}, 1)};
}

// -> (grad input gates, grad hidden gates, grad_hx, grad input bias, grad hidden bias)
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gruCellBackward(const at::Tensor& grad_hy,
                                                                                      const at::Tensor& workspace,
                                                                                      bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hn = w[3], &hx = w[4];
  at::Tensor dn = grad_hy * oneMinus(z) * oneMinus(n * n);
  at::Tensor dz = grad_hy * (hx - n) * z * oneMinus(z);
  at::Tensor dr = dn * hn * r * oneMinus(r);
  at::Tensor grad_input_gates = at::cat({dr, dz, dn}, 1);
  at::Tensor grad_hidden_gates = at::cat({dr, dz, dn * r}, 1);
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hy * z, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", lstmCell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstmCellBackward);
  m.impl("_thnn_fused_gru_cell", gruCell);
  m.impl("_thnn_fused_gru_cell_backward", gruCellBackward);
}

}  // namespace neuron_sim
