package org.deepgreen.dl4j;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * Python's repr() of a float, the package's canonical number form (e.g. 0.0001, 1e-07, 3.0).
 * Java's Double.toString differs in notation (1.0E-7) and, before JDK 19, is not always the
 * shortest round-trip form; this takes the fewest significant digits that parse back to the
 * same double and lays them out by Python's rules (scientific below 1e-4 and from 1e16 on).
 */
final class PythonRepr {
    private PythonRepr() {}

    /** Significant digits that always round-trip a double. */
    private static final int MAX_DIGITS = 17;
    /** Python switches to scientific notation for decimal exponents outside [-4, 16). */
    private static final int MIN_FIXED_EXPONENT = -4;
    private static final int MAX_FIXED_EXPONENT = 16;

    static String of(double value) {
        if (Double.isNaN(value)) return "nan";
        if (Double.isInfinite(value)) return value > 0 ? "inf" : "-inf";
        if (value == 0) return (1 / value < 0) ? "-0.0" : "0.0";
        BigDecimal exact = new BigDecimal(value);
        BigDecimal shortest = exact;
        for (int digits = 1; digits <= MAX_DIGITS; digits++) {
            BigDecimal rounded = exact.round(new MathContext(digits, RoundingMode.HALF_EVEN));
            if (rounded.doubleValue() == value) {
                shortest = rounded;
                break;
            }
        }
        String digits = shortest.unscaledValue().abs().toString().replaceAll("0+$", "");
        if (digits.isEmpty()) digits = "0";
        int exponent = shortest.precision() - shortest.scale() - 1; // of the first digit
        String sign = value < 0 ? "-" : "";
        if (exponent >= MIN_FIXED_EXPONENT && exponent < MAX_FIXED_EXPONENT) {
            if (exponent >= 0) {
                if (digits.length() <= exponent + 1) {
                    return sign + digits + "0".repeat(exponent + 1 - digits.length()) + ".0";
                }
                return sign + digits.substring(0, exponent + 1) + "." + digits.substring(exponent + 1);
            }
            return sign + "0." + "0".repeat(-exponent - 1) + digits;
        }
        String mantissa = digits.length() > 1 ? digits.charAt(0) + "." + digits.substring(1) : digits;
        return sign + mantissa + String.format("e%c%02d", exponent < 0 ? '-' : '+', Math.abs(exponent));
    }
}
