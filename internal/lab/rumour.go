package lab

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/netns"
)

const (
	// memberlistDeadMsg is memberlist's message type for "this member is dead" (its
	// messageType enumeration: ping, indirect ping, ack, suspect, alive, dead, ...).
	memberlistDeadMsg = 5
	// memberlistEncryption is the version byte of memberlist's AES-GCM packets without
	// padding; the nonce follows it, then the sealed message (no label: no
	// additional data).
	memberlistEncryption = 1
)

// deathRumour is memberlist's dead message as it travels: a type byte, then this
// struct in msgpack, fields by name.
type deathRumour struct {
	Incarnation uint32
	Node        string
	From        string
}

// SpreadDeathRumour sends one memberlist packet to the speaker of node to, from the
// client, saying that the speaker of about is dead. It is what a member back from a
// partition gossips about the peers it declared dead while cut off: a receiver believes
// it until the accused, alive all along, hears of it and refutes it, a moment later.
// from names the rumour's source, as the accused logs it when it refutes ("Refuting a
// dead message (from: ...)"); the incarnation is the clock's seconds, above any real
// one, so the receiver cannot discard the rumour as old. The packet is sealed with the
// key of the memberlist Secret, as the speakers' own are.
func (s *State) SpreadDeathRumour(ctx context.Context, to, about, from string) error {
	target, err := s.Worker(to)
	if err != nil {
		return err
	}
	if _, err := s.Worker(about); err != nil {
		return err
	}
	client, err := s.Host(ClientHost)
	if err != nil {
		return err
	}
	var msg bytes.Buffer
	msg.WriteByte(memberlistDeadMsg)
	rumour := deathRumour{Incarnation: uint32(time.Now().Unix()), Node: about, From: from}
	if err := codec.NewEncoder(&msg, &codec.MsgpackHandle{}).Encode(&rumour); err != nil {
		return fmt.Errorf("lab: encoding the death rumour: %w", err)
	}
	packet, err := s.sealForMemberlist(ctx, msg.Bytes())
	if err != nil {
		return err
	}
	conn, err := netns.Dialer(client.Namespace)(ctx, "udp", net.JoinHostPort(target.Addr.String(), memberlistPort))
	if err != nil {
		return fmt.Errorf("lab: rumour of %s's death to %s: %w", about, to, err)
	}
	defer conn.Close()
	if _, err := conn.Write(packet); err != nil {
		return fmt.Errorf("lab: rumour of %s's death to %s: %w", about, to, err)
	}
	return nil
}

// sealForMemberlist encrypts msg as memberlist does a packet, with the key the
// speakers derive from the memberlist Secret.
func (s *State) sealForMemberlist(ctx context.Context, msg []byte) ([]byte, error) {
	kube, err := s.kube()
	if err != nil {
		return nil, err
	}
	secret, err := kube.CoreV1().Secrets(HeraldNamespace).Get(ctx, memberkey.SecretName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("lab: the memberlist Secret: %w", err)
	}
	key, err := memberkey.FromSecretData(secret.Data)
	if err != nil {
		return nil, fmt.Errorf("lab: the memberlist Secret: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("lab: memberlist key: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("lab: memberlist key: %w", err)
	}
	out := make([]byte, 1+gcm.NonceSize(), 1+gcm.NonceSize()+len(msg)+gcm.Overhead())
	out[0] = memberlistEncryption
	nonce := out[1:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return gcm.Seal(out, nonce, msg, nil), nil
}
