/** Compiled with javac --release 8 (class version 52). */
public class TrickyOld {
    static int step(int x) {
        TrickyMain.count("TrickyOld.step");
        switch (x & 3) {
            case 0: return x + 1;
            case 1: return x * 2;
            case 2:
                try {
                    if (x % 10 == 2) { throw new IllegalStateException("old"); }
                    return x - 1;
                } catch (IllegalStateException e) {
                    return 0;
                }
            default: return -x;
        }
    }

    static int run(int n) {
        TrickyMain.count("TrickyOld.run");
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += step(i);
        }
        java.util.function.IntSupplier sup = () -> 5;
        return s + sup.getAsInt();
    }
}
