# frozen_string_literal: true

require "minitest/autorun"
require_relative "../lib/serverlab_em"

# The parser against spec §7.1's rules, one rule per test; the spec's own
# crafted messages are also sent to the running server by `serverlab verify`.
class SyslogParseTest < Minitest::Test
  def parse(text)
    ServerlabEM::SyslogParse.parse(text.b)
  end

  def test_a_5424_message_is_split_into_its_fields
    message = parse("<165>1 2026-11-25T20:00:00.123456+01:00 host.example app 42 ID7 - hello world")
    assert_equal [165, "2026-11-25T20:00:00.123456+01:00", "host.example", "app", "42", "ID7", 0, "hello world", false],
                 message.to_a
  end

  def test_nil_fields_are_nil_and_an_absent_msg_is_empty
    message = parse("<0>1 - - - - - -")
    assert_equal [0, nil, nil, nil, nil, nil, 0, "", false], message.to_a
  end

  def test_structured_data_elements_are_counted_with_escapes_inside_values
    message = parse('<14>1 - host app - - [a@1 x="q\"u" y="b\\\\s" z="c\]"][meta] text')
    assert_equal 2, message.sd_elements
    assert_equal "text", message.msg
  end

  def test_structured_data_not_closed_or_with_a_bare_bracket_is_malformed
    assert_nil parse('<14>1 - host app - - [x@1 a="b"')
    assert_nil parse('<14>1 - host app - - [x@1 a="b]c"] msg')
    assert_nil parse('<14>1 - host app - - [x@1 a="b\c"] msg')
    assert_nil parse("<14>1 - host app - - [x@1]msg")
  end

  def test_a_bom_is_dropped_and_what_follows_must_be_utf8
    assert_equal "h\u00e9".b, parse("<14>1 - host app - - - \xEF\xBB\xBFh\u00e9").msg
    assert_nil parse("<14>1 - host app - - - \xEF\xBB\xBF\xFF")
    assert_equal 5, parse("<14>1 - host app - - - \u00e9t\u00e9").msg.bytesize
  end

  def test_pri_must_be_one_to_three_digits_without_leading_zero_and_at_most_191
    %w[14> <1a> <192> <014> <1000> <14 <>].each { |pri| assert_nil parse("#{pri}1 - host app - - - msg"), pri }
    assert_equal 191, parse("<191>1 - host app - - - msg").pri
  end

  def test_5424_header_faults_are_malformed
    ["<14>2 - host app - - - msg", "<14>1 2026-11-25 20:00:00Z host app - - - msg",
     "<14>1 2026-11-25T20:00:00 host app - - - msg", "<14>1 2026-11-25T20:00:00.1234567Z host app - - - msg",
     "<14>1 -  host app - - - msg", "<14>1 - host #{'a' * 49} - - - msg", "<14>1 - host app - #{'m' * 33} - msg",
     "<14>1 2026-11-25T20:00:00Z host app procid msgid", "<14>1", "<14>10 - host app - - - msg"].each do |text|
      assert_nil parse(text), text
    end
  end

  def test_3164_messages_take_the_tag_and_procid_when_present
    su = parse("<34>Oct 11 22:14:15 mymachine su: 'su root' failed")
    assert_equal [34, "Oct 11 22:14:15", "mymachine", "su", nil, "'su root' failed", true], su.to_a.values_at(0, 1, 2, 3, 4, 7, 8)
    sshd = parse("<86>Nov  5 01:02:03 host sshd[123]: Accepted")
    assert_equal %w[sshd 123 Accepted], [sshd.app, sshd.procid, sshd.msg]
    plain = parse("<13>Dec 31 23:59:59 host just text")
    assert_equal [nil, "just text"], [plain.app, plain.msg]
  end

  def test_3164_without_a_full_timestamp_or_a_hostname_is_malformed
    ["<34>Oct 11 22:14 mymachine su: x", "<34>Foo 11 22:14:15 mymachine su: x", "<34>Oct 11 22:14:15 ",
     "<34>just some text", "<14>"].each { |text| assert_nil parse(text), text }
  end
end
