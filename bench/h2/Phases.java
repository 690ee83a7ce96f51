/**
 * Runs another class's main (bench/h2_phases.sh: H2Load) between two
 * wall-clock stamps, so that a run's elapsed time splits into the JVM's
 * start-up (process start to main), main, and the exit (main's end to the
 * command's end: the JVM's shutdown and, traced, jtrace's own stop).
 */
public class Phases {
    public static void main(String[] args) throws Exception {
        System.out.println("main_start_ms " + System.currentTimeMillis());
        String[] rest = java.util.Arrays.copyOfRange(args, 1, args.length);
        Class.forName(args[0]).getMethod("main", String[].class).invoke(null, (Object) rest);
        System.out.println("main_end_ms " + System.currentTimeMillis());
    }
}
