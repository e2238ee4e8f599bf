package moldau.jvm;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/** Arguments ({@code --name value}, {@code --prop key=value} repeatable) and JSON lines on stdout. */
final class Cli {
    private final Map<String, String> values = new HashMap<>();
    private final List<String> props = new ArrayList<>();

    Cli(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value, got " + a);
            }
            String v = args[++i];
            if (a.equals("--prop")) {
                props.add(v);
            } else {
                values.put(a.substring(2), v);
            }
        }
    }

    String get(String name) {
        String v = values.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v;
    }

    String get(String name, String dflt) {
        return values.getOrDefault(name, dflt);
    }

    int getInt(String name, int dflt) {
        return Integer.parseInt(get(name, Integer.toString(dflt)));
    }

    long getLong(String name, long dflt) {
        return Long.parseLong(get(name, Long.toString(dflt)));
    }

    boolean getBool(String name) {
        return Boolean.parseBoolean(get(name, "false"));
    }

    /** bootstrap.servers plus every --prop key=value. */
    Properties config() {
        Properties p = new Properties();
        p.put("bootstrap.servers", get("bootstrap"));
        for (String kv : props) {
            int eq = kv.indexOf('=');
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return p;
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    /** Print one JSON object on its own line (flushed at once: the tests read the lines as they come). */
    static synchronized void emit(Object... kv) {
        StringBuilder sb = new StringBuilder();
        write(sb, obj(kv));
        System.out.println(sb);
        System.out.flush();
    }

    static String error(Throwable t) {
        Throwable c = t;
        while ((c instanceof java.util.concurrent.ExecutionException
                || c instanceof java.util.concurrent.CompletionException) && c.getCause() != null) {
            c = c.getCause();
        }
        return c.getClass().getSimpleName() + ": " + c.getMessage();
    }

    static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String || v instanceof Character || v instanceof Enum) {
            String s = v.toString();
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    default:
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                }
            }
            sb.append('"');
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else {
            write(sb, v.toString());
        }
    }

}
