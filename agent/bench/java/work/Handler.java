package work;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import infra.Stats;
import infra.Store;

/** Handles one request; one instance per worker thread. */
final class Handler {
    private final Store store;
    private final MessageDigest sha;
    private final StringBuilder sb = new StringBuilder(512);
    /** Hex words in a request body (8 bytes each): the size of the work per call. */
    private final int bodyWords;

    Handler(Store store, int bodyWords) {
        this.store = store;
        this.bodyWords = bodyWords;
        try {
            this.sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    String handle(int i) {
        String line = requestLine(i);
        Map<String, String> req = parse(line);
        if (!validate(req)) {
            return "400";
        }
        String key = hash(req.get("body"));
        String cached = store.get(key);
        if (cached == null) {
            cached = render(req, key);
            store.put(key, cached);
        }
        Stats.record(req.get("user"), cached.length());
        return cached;
    }

    /** A request line like an HTTP query string, with a body of about 8 x bodyWords bytes. */
    String requestLine(int i) {
        sb.setLength(0);
        sb.append("user=u").append(i % 97).append("&op=").append(i % 3 == 0 ? "put" : "get");
        sb.append("&item=").append(i % 5000).append("&body=");
        for (int k = 0; k < bodyWords; k++) {
            sb.append(Integer.toHexString((i * 31 + k) * 0x9E3779B1));
        }
        return sb.toString();
    }

    static Map<String, String> parse(String line) {
        Map<String, String> m = new HashMap<>();
        for (String kv : line.split("&")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                m.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        return m;
    }

    static boolean validate(Map<String, String> req) {
        String user = req.get("user");
        String op = req.get("op");
        String body = req.get("body");
        if (user == null || !user.startsWith("u") || !("get".equals(op) || "put".equals(op)) || body == null) {
            return false;
        }
        for (int k = 0; k < body.length(); k++) {
            if (Character.digit(body.charAt(k), 16) < 0) {
                return false;
            }
        }
        return true;
    }

    String hash(String body) {
        sha.reset();
        byte[] d = sha.digest(body.getBytes(StandardCharsets.UTF_8));
        sb.setLength(0);
        for (int k = 0; k < 8; k++) {
            sb.append(Character.forDigit((d[k] >> 4) & 15, 16)).append(Character.forDigit(d[k] & 15, 16));
        }
        return sb.toString();
    }

    static String render(Map<String, String> req, String key) {
        List<String> fields = new ArrayList<>(req.keySet());
        fields.sort(null);
        StringBuilder out = new StringBuilder(256);
        out.append("{\"key\":\"").append(key).append('"');
        for (String f : fields) {
            if (!f.equals("body")) {
                out.append(",\"").append(f).append("\":\"").append(req.get(f)).append('"');
            }
        }
        return out.append(",\"len\":").append(req.get("body").length()).append('}').toString();
    }
}
