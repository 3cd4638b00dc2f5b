// Consume-transform-produce with Kafka's Java clients, as their javadoc shows it: a
// read_committed KafkaConsumer in group GROUP, a transactional KafkaProducer with id TXN_ID,
// every polled batch copied (value upper-cased) to OUTPUT and its offsets committed with
// sendOffsetsToTransaction in the same transaction. Exits 0 after COUNT records, printing
// "COPIED <n> IN <transactions>"; exits 1 (printing the error) on any failure, or after 120 s.
//
//   java -cp CLASSPATH TxnCopy BOOTSTRAP GROUP TXN_ID INPUT OUTPUT COUNT

import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnCopy {
    public static void main(String[] args) {
        String bootstrap = args[0], group = args[1], txnId = args[2], input = args[3], output = args[4];
        long count = Long.parseLong(args[5]);
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30000);
        long deadline = System.currentTimeMillis() + 120_000;
        long copied = 0, transactions = 0;
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer());
             KafkaProducer<String, String> producer =
                     new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(input));
            while (copied < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("copied only " + copied + " of " + count + " in 120 s");
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value().toUpperCase(Locale.ROOT)));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                copied += records.count();
                transactions++;
            }
            System.out.println("COPIED " + copied + " IN " + transactions);
            System.out.flush();
        } catch (Exception e) {
            System.out.println("FAILED " + e);
            e.printStackTrace(System.out);
            System.exit(1);
        }
        System.exit(0);
    }
}
