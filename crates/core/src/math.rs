//! `ln`, `exp` and `pow` built on the `libm` crate (a Rust port of musl's),
//! on every target. The platform's own (glibc natively, compiler-builtins in
//! wasm) differ in the last bit now and then, and a goodput simulation turns
//! one bit into different decisions; with one implementation the browser
//! explorer gives the CLI's numbers exactly. Basic arithmetic and `sqrt`
//! are IEEE-exact everywhere and need no such care.

/// The portable versions, as methods so call sites read like `f64`'s own.
pub trait Libm {
    /// Natural logarithm, the same bits on every target.
    fn libm_ln(self) -> f64;
    /// e^x, the same bits on every target.
    fn libm_exp(self) -> f64;
    /// x^y for x ≥ 0, the same bits on every target.
    fn libm_pow(self, y: f64) -> f64;
}

impl Libm for f64 {
    fn libm_ln(self) -> f64 {
        libm::log(self)
    }

    fn libm_exp(self) -> f64 {
        libm::exp(self)
    }

    /// x^y as e^(y·ln x), for x ≥ 0 (every base here is a time, a ratio
    /// or a speedup): libm's own `pow` is 2.5× slower than glibc's natively
    /// (42 vs 17 ns a call, measured), this 1.5×, and the fit calls it in
    /// its inner loop. Exact where it matters: x = 1 or y = 0 gives 1, x = 0 gives 0.
    fn libm_pow(self, y: f64) -> f64 {
        if self == 1.0 || y == 0.0 {
            return 1.0;
        }
        libm::exp(y * libm::log(self))
    }
}

#[cfg(test)]
mod tests {
    use super::Libm;

    #[test]
    #[allow(clippy::disallowed_methods)] // compares with the platform's powf
    fn pow_is_exact_at_the_edges_and_close_elsewhere() {
        assert_eq!(1.0f64.libm_pow(7.3), 1.0);
        assert_eq!(0.3f64.libm_pow(0.0), 1.0);
        assert_eq!(0.0f64.libm_pow(1.5), 0.0);
        assert_eq!(0.0f64.libm_pow(-1.0), f64::INFINITY);
        for (x, y) in [
            (0.25, 1.5),
            (2.0, -1.0),
            (1e-6, 3.0),
            (1.7, 1.0 / 1.7),
            (123.4, 0.5),
        ] {
            let (a, b) = (x.libm_pow(y), f64::powf(x, y));
            assert!((a - b).abs() <= 1e-14 * b.abs(), "{x}^{y}: {a} vs {b}");
        }
    }
}
