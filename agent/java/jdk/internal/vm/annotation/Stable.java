package jdk.internal.vm.annotation;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Compile-time stand-in for HotSpot's own jdk.internal.vm.annotation.Stable
 * (java.base, not exported). Only its name is used: HotSpot honours the
 * annotation on fields of classes defined by the boot class loader, as the
 * agent defines jtrace.Probe: the JIT takes an element of a stable array
 * for a constant once it is no longer zero or null. This class is never
 * loaded.
 */
@Target(ElementType.FIELD)
@Retention(RetentionPolicy.RUNTIME)
public @interface Stable {
}
