#Anything in this file, followed by a period (and an upper-case word), does NOT indicate an end-of-sentence marker.

#common exceptions
# Dr
ড

#others


#phonetics
# A
এ
# B
বি
# C
সি
# D
ডি
# E
ই
# F
এফ
# G
জি
# H
এইচ
# I
আম
# J
জে
# K
কে
# L
এল
# M
এম
# N
এন
# O
হে
# P
পি
# Q
কিউ
# R
আর
# S
এস
# T
টি
# U
ইউ
# V
ভি 
# W
ডব্লু
# X
এক্স
# Y
ওয়াই
# Z
জেড

#consonants

