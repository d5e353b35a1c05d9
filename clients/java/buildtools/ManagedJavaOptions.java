/*
 * Build step of pom.xml (run by exec-maven-plugin in generate-sources, as a
 * single-file Java program: no compilation, no dependency).
 *
 * The contract's .proto files carry no Java options: buf's managed mode
 * (buf.gen.yaml) gives every language its package options instead. protoc, run
 * here by protobuf-maven-plugin on its own, does not know managed mode, so this
 * copies proto/ to target/ and writes, after each file's `package` statement,
 * the three Java options that managed mode would set:
 *
 *   option java_package = "<prefix>.<proto package>";     // java_package_prefix: dev
 *   option java_multiple_files = true;                    // managed-mode default
 *   option java_outer_classname = "<PascalCaseFile>Proto"; // managed-mode default
 *
 * so the Java API (dev.groundwire.v1.RetrieveRequest, dev.groundwire.v1.RetrieverProto, ...)
 * is the one buf generated. A .proto that sets a java_* option itself is an
 * error (managed mode would silently override it; the contract has none).
 *
 *   java ManagedJavaOptions.java <proto dir> <output dir> <java package prefix>
 */
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

public final class ManagedJavaOptions {
  private static final Pattern PACKAGE =
      Pattern.compile("^package\\s+([A-Za-z_][\\w.]*)\\s*;[^\\n]*\\n", Pattern.MULTILINE);
  private static final Pattern JAVA_OPTION =
      Pattern.compile("^\\s*option\\s+java_\\w+\\s*=", Pattern.MULTILINE);

  public static void main(String[] args) throws IOException {
    if (args.length != 3) {
      System.err.println("usage: java ManagedJavaOptions.java <proto dir> <output dir> <java package prefix>");
      System.exit(2);
    }
    Path src = Path.of(args[0]).toAbsolutePath().normalize();
    Path out = Path.of(args[1]).toAbsolutePath().normalize();
    String prefix = args[2];
    deleteTree(out); // a removed .proto must not linger in target/
    List<Path> protos;
    try (Stream<Path> walk = Files.walk(src)) {
      protos = walk.filter(p -> p.toString().endsWith(".proto") && Files.isRegularFile(p)).sorted().toList();
    }
    if (protos.isEmpty()) {
      throw new IllegalStateException("no .proto files under " + src);
    }
    for (Path proto : protos) {
      Path rel = src.relativize(proto);
      String text = Files.readString(proto, StandardCharsets.UTF_8);
      if (JAVA_OPTION.matcher(text).find()) {
        throw new IllegalStateException(rel + " sets a java_* option; the contract leaves them to buf managed mode");
      }
      Matcher m = PACKAGE.matcher(text);
      if (!m.find()) {
        throw new IllegalStateException(rel + " has no package statement");
      }
      String options = "option java_package = \"" + prefix + "." + m.group(1) + "\";\n"
          + "option java_multiple_files = true;\n"
          + "option java_outer_classname = \"" + outerClassname(proto) + "\";\n";
      Path target = out.resolve(rel);
      Files.createDirectories(target.getParent());
      Files.writeString(target, text.substring(0, m.end()) + options + text.substring(m.end()), StandardCharsets.UTF_8);
    }
    System.out.println("ManagedJavaOptions: " + protos.size() + " protos from " + src + " -> " + out);
  }

  /** buf managed mode's default: the file's base name in PascalCase + "Proto" (error_details.proto -> ErrorDetailsProto). */
  static String outerClassname(Path proto) {
    String base = proto.getFileName().toString().replaceFirst("\\.proto$", "");
    StringBuilder sb = new StringBuilder();
    boolean upper = true;
    for (char c : base.toCharArray()) {
      if (c == '_' || c == '-' || c == '.' || Character.isWhitespace(c)) {
        upper = true;
      } else {
        sb.append(upper ? Character.toUpperCase(c) : c);
        upper = false;
      }
    }
    return sb + "Proto";
  }

  private static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> walk = Files.walk(dir)) {
      walk.sorted((a, b) -> b.getNameCount() - a.getNameCount()).forEach(p -> {
        try {
          Files.delete(p);
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      });
    }
  }
}
