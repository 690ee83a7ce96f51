import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * Victim of the kill -9 test (tests/jvm_killed.rs). Usage:
 * java KilledMidRun <calls> <marker file>
 *
 * Calls work() <calls> times, then writes "<pid> <calls>" to the marker file
 * and sleeps until it is killed.
 */
public class KilledMidRun {
    static long sink;

    static int work(int i) {
        return Integer.rotateLeft(i, 3) ^ i;
    }

    public static void main(String[] args) throws Exception {
        int calls = Integer.parseInt(args[0]);
        for (int i = 0; i < calls; i++) {
            sink += work(i);
        }
        String line = ProcessHandle.current().pid() + " " + calls + " " + (sink & 1) + "\n";
        Files.write(Paths.get(args[1] + ".tmp"), line.getBytes());
        Files.move(Paths.get(args[1] + ".tmp"), Paths.get(args[1]));
        Thread.sleep(600_000);
    }
}
