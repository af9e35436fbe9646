"""The frame around every lesson and the teaching features: the shell (sidebar, navigation,
model status), presenter mode and "Share this view", follow the teacher, the class store, QR."""
