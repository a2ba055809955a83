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

    /**
     * One delivery of a cycle; a replay (§10) is a cycle of one, marked {@code replayed}.
     * A publish cycle's deliveries carry its data (§11).
     */
    static byte[] event(Subscriber subscriber, String name, EventChannel.Cycle cycle, long sent,
            int total, int place, int finish, boolean replayed) {
        return render(subscriber, sent, finish, g -> {
            g.writeObjectFieldStart("event");
            g.writeStringField("name", name);
            g.writeNumberField("seq", cycle.seq());
            writeTimings(g, cycle.created(), sent);
            g.writeObjectFieldStart("connections");
            g.writeNumberField("total", total);
            g.writeNumberField("place", place);
            g.writeEndObject();
            if (cycle.dataJson() != null) {
                g.writeFieldName("data");
                g.writeRawValue(cycle.dataJson());
            }
            if (replayed) {
                g.writeBooleanField("replayed", true);
            }
            g.writeEndObject();
        });
    }

    static byte[] timeout(Subscriber subscriber, long sent, int finish) {
        return render(subscriber, sent, finish, g -> g.writeBooleanField("timeout", true));
    }

    private static byte[] render(Subscriber subscriber, long sent, int finish, ResponsePart response) {
        String requestJson = subscriber.spec().requestJson();
        ByteArrayBuilder out = new ByteArrayBuilder(384 + requestJson.length());
        try (JsonGenerator g = Json.FACTORY.createGenerator(out)) {
            g.writeStartObject();
            g.writeObjectFieldStart("response");
            response.write(g);
            g.writeEndObject();
            g.writeFieldName("request");
            g.writeRawValue(requestJson);
            writeTimings(g, subscriber.created(), sent);
            g.writeObjectFieldStart("connections");
            g.writeNumberField("start", subscriber.startCount());
            g.writeNumberField("finish", finish);
            g.writeEndObject();
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (subscriber.transport() == Transport.COMET) {
            out.append('\n'); // comet lines are NDJSON; every other transport frames the bare object
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
