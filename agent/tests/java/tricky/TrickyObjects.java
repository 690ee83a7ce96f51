/** Constructors (this(), super(), a super constructor that throws), a default method. */
public class TrickyObjects {
    static class Base {
        final int v;

        Base(int v) {
            if (v < 0) {
                TrickyMain.exc("TrickyObjects$Base.<init>");
                throw new IllegalArgumentException("negative");
            }
            this.v = v;
        }
    }

    static class Child extends Base {
        final String s;

        Child(int v) {
            this(v, v % 2 == 0 ? "even" : new StringBuilder("odd").toString());
        }

        Child(int v, String s) {
            super(check(v));
            this.s = s;
        }

        static int check(int v) {
            TrickyMain.count("TrickyObjects$Child.check");
            return v;
        }
    }

    interface Twice {
        default int twice(int x) {
            TrickyMain.count("TrickyObjects$Twice.twice");
            return 2 * x;
        }
    }

    static class Impl implements Twice {
    }

    static int run(int i) {
        TrickyMain.count("TrickyObjects.run");
        try {
            // Every fourth child gets a negative value: Base.<init> throws,
            // so both Child constructors are left by an exception raised in
            // their super()/this() call.
            Child c = new Child(i % 4 == 3 ? -i : i);
            return c.v + c.s.length();
        } catch (IllegalArgumentException e) {
            TrickyMain.exc("TrickyObjects$Child.<init>(I)");
            return -1;
        }
    }
}
