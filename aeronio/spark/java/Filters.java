package io.aeronio.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;

/**
 * A query's filters, as far as they choose what is read: recordings by their recording_id,
 * session_id, stream_id and channel, and the positions of messages (position bounds from the
 * top-level conjunction). Only metadata columns count (a record field of the same name does
 * not). Spark still applies every filter to the rows, so a filter read too widely here costs
 * time, never rows.
 */
final class Filters {
  private static final Set<String> RECORDING = Set.of("recording_id", "session_id", "stream_id", "channel");

  private Filters() {}

  /** The filters that choose what is read. */
  static Filter[] used(Filter[] filters, Set<String> metadata) {
    List<Filter> out = new ArrayList<>();
    for (Filter f : filters) {
      for (String column : f.references()) {
        if (metadata.contains(column) && (RECORDING.contains(column) || column.equals("position"))) {
          out.add(f);
          break;
        }
      }
    }
    return out.toArray(new Filter[0]);
  }

  /** Whether every filter may hold for some row of recording `r`. */
  static boolean mayHold(Filter[] filters, Set<String> metadata, Archive.Recording r) {
    for (Filter f : filters) {
      if (Boolean.FALSE.equals(eval(f, metadata, r))) {
        return false;
      }
    }
    return true;
  }

  /** The filter's value for every row of `r`: TRUE, FALSE, or null (it depends on the row). */
  private static Boolean eval(Filter f, Set<String> metadata, Archive.Recording r) {
    if (f instanceof And a) {
      Boolean left = eval(a.left(), metadata, r), right = eval(a.right(), metadata, r);
      if (Boolean.FALSE.equals(left) || Boolean.FALSE.equals(right)) {
        return false;
      }
      return left != null && right != null ? Boolean.TRUE : null;
    }
    if (f instanceof Or o) {
      Boolean left = eval(o.left(), metadata, r), right = eval(o.right(), metadata, r);
      if (Boolean.TRUE.equals(left) || Boolean.TRUE.equals(right)) {
        return true;
      }
      return left != null && right != null ? Boolean.FALSE : null;
    }
    if (f instanceof Not n) {
      Boolean inner = eval(n.child(), metadata, r);
      return inner == null ? null : !inner;
    }
    String[] refs = f.references();
    if (refs.length != 1 || !metadata.contains(refs[0]) || !RECORDING.contains(refs[0])) {
      return null;
    }
    Object value = switch (refs[0]) {
      case "recording_id" -> r.recordingId();
      case "session_id" -> (long) r.sessionId();
      case "stream_id" -> (long) r.streamId();
      default -> r.channel();
    };
    if (f instanceof IsNotNull) {
      return true;
    }
    if (f instanceof IsNull) {
      return false;
    }
    if (f instanceof EqualTo e) {
      return compare(value, e.value(), 0, 0);
    }
    if (f instanceof EqualNullSafe e) {
      return compare(value, e.value(), 0, 0);
    }
    if (f instanceof GreaterThan g) {
      return compare(value, g.value(), 1, 1);
    }
    if (f instanceof GreaterThanOrEqual g) {
      return compare(value, g.value(), 0, 1);
    }
    if (f instanceof LessThan l) {
      return compare(value, l.value(), -1, -1);
    }
    if (f instanceof LessThanOrEqual l) {
      return compare(value, l.value(), -1, 0);
    }
    if (f instanceof In in) {
      for (Object v : in.values()) {
        Boolean hit = compare(value, v, 0, 0);
        if (hit == null || hit) {
          return hit;
        }
      }
      return false;
    }
    if (value instanceof String text) {
      if (f instanceof StringContains s) {
        return text.contains(s.value());
      }
      if (f instanceof StringStartsWith s) {
        return text.startsWith(s.value());
      }
      if (f instanceof StringEndsWith s) {
        return text.endsWith(s.value());
      }
    }
    return null;
  }

  /** Whether the sign of value - given is in [low, high]; null when they do not compare. */
  private static Boolean compare(Object value, Object given, int low, int high) {
    int sign;
    if (value instanceof Long v && (given instanceof Long || given instanceof Integer
        || given instanceof Short || given instanceof Byte)) {
      sign = Long.compare(v, ((Number) given).longValue());
    } else if (value instanceof String v && given instanceof String g) {
      sign = Integer.signum(v.compareTo(g));
    } else {
      return null;
    }
    return sign >= low && sign <= high;
  }

  /** [low, high) of message positions the top-level conjunction of filters allows. */
  static long[] positions(Filter[] filters, Set<String> metadata) {
    long[] bounds = {0, Long.MAX_VALUE};
    if (metadata.contains("position")) {
      for (Filter f : filters) {
        narrow(f, bounds);
      }
    }
    return bounds;
  }

  private static void narrow(Filter f, long[] b) {
    if (f instanceof And a) {
      narrow(a.left(), b);
      narrow(a.right(), b);
      return;
    }
    String[] refs = f.references();
    if (refs.length != 1 || !refs[0].equals("position")) {
      return;
    }
    if (f instanceof EqualTo e && e.value() instanceof Number v && integral(v)) {
      at(b, v.longValue(), after(v.longValue()));
    } else if (f instanceof EqualNullSafe e && e.value() instanceof Number v && integral(v)) {
      at(b, v.longValue(), after(v.longValue()));
    } else if (f instanceof GreaterThan g && g.value() instanceof Number v && integral(v)) {
      at(b, after(v.longValue()), Long.MAX_VALUE);
    } else if (f instanceof GreaterThanOrEqual g && g.value() instanceof Number v && integral(v)) {
      at(b, v.longValue(), Long.MAX_VALUE);
    } else if (f instanceof LessThan l && l.value() instanceof Number v && integral(v)) {
      at(b, 0, v.longValue());
    } else if (f instanceof LessThanOrEqual l && l.value() instanceof Number v && integral(v)) {
      at(b, 0, after(v.longValue()));
    } else if (f instanceof In in) {
      long min = Long.MAX_VALUE, max = -1;
      for (Object value : in.values()) {
        if (!(value instanceof Number v && integral(v))) {
          return;
        }
        min = Math.min(min, v.longValue());
        max = Math.max(max, v.longValue());
      }
      at(b, min, after(max));
    }
  }

  /**
   * The bound just past `position`: Long.MAX_VALUE stands for no bound, so a position of
   * Long.MAX_VALUE (past any recorded one) leaves it there rather than wrapping to none read.
   */
  private static long after(long position) {
    return position == Long.MAX_VALUE ? Long.MAX_VALUE : position + 1;
  }

  private static boolean integral(Number v) {
    return v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte;
  }

  private static void at(long[] b, long low, long high) {
    b[0] = Math.max(b[0], low);
    b[1] = Math.min(b[1], Math.max(high, 0));
  }
}
