package jdk.internal.vm.annotation;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Compile-time stand-in for HotSpot's own jdk.internal.vm.annotation.DontInline
 * (java.base, not exported). Only its name is used: HotSpot honours the
 * annotation on methods of classes defined by the boot class loader, as the
 * agent defines jtrace.Probe; this class is never loaded.
 */
@Target({ElementType.METHOD, ElementType.CONSTRUCTOR})
@Retention(RetentionPolicy.RUNTIME)
public @interface DontInline {
}
