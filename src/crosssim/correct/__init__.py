"""Human-in-the-loop corrections: a simulated operator, residual policies learned from interventions (docs/correction.md)."""
