package serverlab.core;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.util.ByteArrayBuilder;
import java.io.IOException;
import java.io.UncheckedIOException;

/** Writes the seed 004 response shape (spec §6) with Jackson's streaming generator. */
final class Deliveries {
    private Deliveries() {
    }

    /** Writes the {@code response} object; the rest of the answer is common to all answers. */
    @FunctionalInterface
    private interface ResponsePart {
        void write(JsonGenerator g) throws IOException;
    }

    static byte[] event(PushRequest request, String name, long seq, long created, long sent,
            int total, int place, int finish) {
        return render(request, sent, finish, g -> {
            g.writeObjectFieldStart("event");
            g.writeStringField("name", name);
            g.writeNumberField("seq", seq);
            writeTimings(g, created, sent);
            g.writeObjectFieldStart("connections");
            g.writeNumberField("total", total);
            g.writeNumberField("place", place);
            g.writeEndObject();
            g.writeEndObject();
        });
    }

    static byte[] timeout(PushRequest request, long sent, int finish) {
        return render(request, sent, finish, g -> g.writeBooleanField("timeout", true));
    }

    private static byte[] render(PushRequest request, long sent, int finish, ResponsePart response) {
        String requestJson = request.spec().requestJson();
        ByteArrayBuilder out = new ByteArrayBuilder(384 + requestJson.length());
        try (JsonGenerator g = Json.FACTORY.createGenerator(out)) {
            g.writeStartObject();
            g.writeObjectFieldStart("response");
            response.write(g);
            g.writeEndObject();
            g.writeFieldName("request");
            g.writeRawValue(requestJson);
            writeTimings(g, request.created(), sent);
            g.writeObjectFieldStart("connections");
            g.writeNumberField("start", request.startCount());
            g.writeNumberField("finish", finish);
            g.writeEndObject();
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (!request.longPoll()) {
            out.append('\n'); // comet lines are NDJSON; a long-poll answer is the bare object
        }
        return out.toByteArray();
    }

    private static void writeTimings(JsonGenerator g, long created, long sent) throws IOException {
        g.writeObjectFieldStart("timings");
        g.writeNumberField("duration", sent - created);
        g.writeNumberField("sent", sent);
        g.writeNumberField("created", created);
        g.writeEndObject();
    }
}
