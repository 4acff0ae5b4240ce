"""PyTorch implementations: batched, device-agnostic, dtype-preserving, autograd-friendly."""
