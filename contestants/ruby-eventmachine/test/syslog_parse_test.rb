# frozen_string_literal: true

require "json"
require "minitest/autorun"
require_relative "../lib/serverlab_em"

# The parser against spec §7.1's own test vectors (spec/vectors/syslog.json, shared by
# every contestant's tests); the spec's crafted messages are also sent to the running
# server by `serverlab verify`.
class SyslogParseTest < Minitest::Test
  VECTORS = JSON.parse(File.read(File.expand_path("../../../spec/vectors/syslog.json", __dir__)))
  FIELDS = %w[pri timestamp host app procid msgid sd_elements msg rfc3164].freeze

  # The bytes a vector's string stands for: one character a byte.
  def self.latin1(text)
    text.encode(Encoding::ISO_8859_1).b
  end

  def parse(text)
    ServerlabEM::SyslogParse.parse(self.class.latin1(text))
  end

  VECTORS["parsed"].each_with_index do |vector, index|
    define_method("test_parsed_vector_#{index}_#{vector['name'].gsub(/\W+/, '_')}") do
      message = parse(vector["input"])
      refute_nil message, vector["name"]
      want = FIELDS.map { |name| vector["fields"][name] }
      want = want.map { |value| value.is_a?(String) ? self.class.latin1(value) : value }
      assert_equal want, message.to_a, vector["name"]
    end
  end

  def test_the_specs_malformed_vectors_are_malformed
    VECTORS["malformed"].each { |vector| assert_nil parse(vector["input"]), vector["name"] }
  end
end
