import ChatGPTCredential
print("skeleton")
