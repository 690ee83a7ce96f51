import java.lang.reflect.Field;
import java.util.Arrays;

/**
 * Demotion while calls are open (agent/tests/rewrite.rs): a recursion that
 * demotes every method at its bottom, through the agent's own switch
 * (jtrace.Probe.DEMOTED, set by reflection here as the demoter sets it
 * through JNI), then unwinds normally; another that demotes and unwinds by
 * an exception; then calls made after the demotion. Every call entered
 * before the switch must record its exit, none after it anything.
 */
public class DemoteMidCall {
    static int depth(int n, boolean demote) throws Exception {
        if (n == 0) {
            if (demote) {
                demoteAll();
            }
            return 0;
        }
        return 1 + depth(n - 1, demote);
    }

    static int thrower(int n) throws Exception {
        if (n == 0) {
            demoteAll();
            throw new IllegalStateException("bottom");
        }
        return thrower(n - 1) + 1;
    }

    static void demoteAll() throws Exception {
        Field f = Class.forName("jtrace.Probe").getDeclaredField("DEMOTED");
        f.setAccessible(true);
        byte[] all = new byte[1 << 16];
        Arrays.fill(all, (byte) 1);
        f.set(null, all);
    }

    public static void main(String[] args) throws Exception {
        int sum = 0;
        for (int i = 0; i < 5; i++) {
            sum += depth(10, false);
        }
        if (args.length > 0 && args[0].equals("throw")) {
            try {
                thrower(5);
            } catch (IllegalStateException e) {
                sum += 100;
            }
        } else {
            sum += depth(10, true);
        }
        for (int i = 0; i < 3; i++) {
            sum += depth(10, false) + depth(3, false);
        }
        System.out.println("SUM " + sum);
    }
}
