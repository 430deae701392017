# shellcheck shell=bash
# How a broker of this project is configured, written once for both places that start one: scripts/kafka.sh
# on a machine and deploy/kafka-broker.sh in docker-compose.yaml's kafka service (which mounts conf/kafka/).
# Sourced, not run. Each function prints to stdout; the caller writes it owner-only, since most of it holds
# the SCRAM login. One combined KRaft controller+broker (node 1); clients use SASL/SCRAM-SHA-256.

KAFKA_SCRAM_MECHANISM=SCRAM-SHA-256

# A KRaft cluster id: 16 random bytes, base64url without padding, never starting with '-' (the format tool
# would read it as an option; Kafka's own random ids never start with one for that reason).
kafka_new_cluster_id() {
  local id=-
  while [[ $id == -* ]]; do id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '='); done
  echo "$id"
}

# server.properties: conf/kafka/server.properties plus this broker's listeners, log dirs and login.
# $1 header line, $2 the shared properties file, $3 the client listener's bind address, $4 the name clients
# reach it by, $5 client port, $6 controller port (loopback), $7 log dirs, $8 user, $9 password.
kafka_server_properties() {
  echo "# $1"
  cat "$2"
  echo "node.id=1"
  echo "controller.quorum.voters=1@127.0.0.1:$6"
  echo "listeners=SASL_PLAINTEXT://$3:$5,CONTROLLER://127.0.0.1:$6"
  echo "advertised.listeners=SASL_PLAINTEXT://$4:$5"
  echo "log.dirs=$7"
  echo "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$8\" password=\"$9\";"
}

# client.properties, in librdkafka's key names (what autoscaler.kafka and the Kafka-fed jobs read).
# $1 header line, $2 host, $3 port, $4 user, $5 password.
kafka_client_properties() {
  echo "# $1"
  echo "bootstrap.servers=$2:$3"
  echo "security.protocol=SASL_PLAINTEXT"
  echo "sasl.mechanism=$KAFKA_SCRAM_MECHANISM"
  echo "sasl.username=$4"
  echo "sasl.password=$5"
}

# A java @argument file that formats the storage once, with the SCRAM user the listener accepts (KRaft keeps
# it in the metadata log): the password reaches the tool through this file, never a command line.
# $1 cluster id, $2 server.properties, $3 user, $4 password.
kafka_format_args() {
  printf 'kafka.tools.StorageTool\nformat\n-t\n%s\n-c\n"%s"\n--add-scram\n"%s=[name=%s,password=%s]"\n--ignore-formatted\n' \
    "$1" "$2" "$KAFKA_SCRAM_MECHANISM" "$3" "$4"
}
